"""GPU topology: model, parsers, NVML discovery, tree, report, picture and encoding."""
