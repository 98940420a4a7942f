"""The pytest plugin of gpumemprof (`pytest --gpumemprof`), registered as a pytest11 entry point.
Filled by the plugin's own work; until then it adds nothing to pytest."""
