"""The benchmark and study scripts, by purpose (`benchmarks/README.md`): `speed/`, `studies/`, `data/`, `probes/`,
`gpu/`, and `common.py`, which they share. A package, so that a script imports another by its folder
(``from benchmarks.studies import multi30k_study``); each script puts the repository on ``sys.path`` first, so that
``python benchmarks/<folder>/<script>.py`` runs from anywhere."""
