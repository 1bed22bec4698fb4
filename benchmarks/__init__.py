"""The measurement scripts, a package so that one script imports another as a module
(`from benchmarks.effect import real_model`), never by bare name. Three kinds, a folder each:
`fidelity/` (the plugins' scorers against the official ones), `effect/` (what the method does
to a model) and `cost/` (speed, memory, cost); `frame.py` holds what several of them share.
docs/benchmarks.md, "The measurement scripts", lists which script is which."""
