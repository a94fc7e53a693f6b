"""The Tavern's commands: ``innkeeper import``/``export`` (:mod:`.import_export`, with the
SillyTavern folder form in :mod:`.folder_import`) and ``innkeeper playthroughs``
(:mod:`.playthroughs`). Entry points in the plugin's pyproject.toml."""
