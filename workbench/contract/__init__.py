"""The plugin contract: everything a domain plugin and the engine agree on, in one package.

* `hookspecs`: the pluggy hook specifications (`hookimpl`, the `workbench_*` hooks);
* `tasks`: the value types the hooks take and return (`Task`, `Score`, `Rejection`,
  `AgentStats`, `DomainInfo`, `MetricInfo`, `ReportSection`, `Interaction`, `MAX_DIFFICULTY`)
  and the atomic JSON Lines writers pools are kept with;
* `validity`: what a hook must return, one set of rules for the runtime and the checker;
* `containment`: the fault guard every hook call goes through (time budget, private task
  copies, fault codes);
* `domain`: one plugin's hooks as the engine calls them, and their fallbacks;
* `registry`: loading plugins (built-ins, entry points, the allowlist), broken ones recorded;
* `aggregation`: domain metrics declared once (`MetricInfo`) and aggregated by the core;
* `plugin_support`: helpers for plugins (option readers, grouped means, example failures);
* `conformance`: the plugin conformance checker (`workbench check-plugin`).

Plugins do not import this package: their one import surface is the top-level `workbench`
module, which re-exports the names of this contract a plugin needs. The package imports
nothing of the engine (`workbench.engine`), the widgets (`workbench.ui`) or the reports
(`workbench.reports`); `tests/test_import_graph.py` checks it.
"""
