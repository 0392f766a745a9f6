"""Composition roots, the only modules that wire layers together: scheduler service, local mode."""
