"""The runtime: executes an ExecutionPlan (and the Experiment inside it) on Ray. It knows nothing about dialects.

Importing this package is cheap; torch, ray and transformers are imported by the modules that use them.
Entry point: `rlcfg.runtime.driver.run(plan, RunOptions(...))`.
"""
