"""Every flag says what it does: each argparse action of every `hf-syntax-mt` subcommand (the subcommand choice
included), and each flag of the train script (`HfArgumentParser` over its dataclasses and transformers'
`Seq2SeqTrainingArguments`), has a help text. A flag added without one fails here, named."""

import argparse

from hf_syntax_mt.cli_args import build_parser


def missing_help(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """The actions of ``parser`` and of its subparsers, recursively, that have no help text, each as
    ``"subcommand --flag"`` (a positional by its dest; a subcommand choice as ``"prefix {name}"``)."""
    found = []
    for action in parser._actions:
        name = " ".join(filter(None, (prefix, action.option_strings[-1] if action.option_strings else action.dest)))
        if action.help in (None, "") and action.help is not argparse.SUPPRESS:
            found.append(name)
        if isinstance(action, argparse._SubParsersAction):
            helped = {c.dest for c in action._choices_actions if c.help}  # argparse keeps a choice's help only here
            found += [f"{prefix} {{{command}}}".strip() for command in action.choices if command not in helped]
            for command, sub in action.choices.items():
                found += missing_help(sub, " ".join(filter(None, (prefix, command))))
    return found


def test_the_walk_names_each_action_without_help_at_any_depth():
    top = argparse.ArgumentParser(prog="x")
    top.add_argument("--verbose", action="store_true")  # no help
    sub = top.add_subparsers(dest="command", help="the subcommand")
    a = sub.add_parser("a", help="does a")
    a.add_argument("--size", type=int, help="how many")
    a.add_argument("path")  # a positional, no help
    b = sub.add_parser("b")  # a subcommand without help
    group = b.add_mutually_exclusive_group()
    group.add_argument("--left", help="to the left")
    group.add_argument("--right")  # in a group, no help
    deeper = b.add_subparsers(dest="mode", help="the mode")
    deeper.add_parser("c", help="does c").add_argument("--depth")  # two levels down, no help
    assert sorted(missing_help(top)) == sorted(["--verbose", "a path", "{b}", "b --right", "b c --depth"])


def test_every_flag_of_every_subcommand_has_a_help():
    parser = build_parser()
    assert missing_help(parser) == []
    # the walk reached every subcommand (train's flags are the train script's: the next test)
    commands = parser._subparsers._group_actions[0].choices
    assert {"demo", "train", "translate", "evaluate", "export", "align", "aer", "uas", "parse"} <= set(commands)


def test_every_train_flag_has_a_help():
    from hf_syntax_mt.training.script_args import train_parser

    parser = train_parser()
    flags = [a for a in parser._actions if a.option_strings]
    assert len(flags) > 100  # ours and transformers' Seq2SeqTrainingArguments'
    assert missing_help(parser) == []
