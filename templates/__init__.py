"""Built-in templates (shipped as mcptask_gen.templates); this file is not a template."""
