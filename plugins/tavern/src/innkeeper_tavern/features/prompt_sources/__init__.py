"""Tavern's side of the Assembler (``dshPromptAssembler`` / ``dshPromptSources``).

* :mod:`.link` — the version check at setup and the registration of Tavern's sources;
* :mod:`.sources` — the ``tavern.profile`` source (the resolved card, preset, persona and lore);
* :mod:`.mvu_state` — the ``tavern.mvu/state`` source (the session's MVU variables);
* :mod:`.state` — whether a session is served by an applied strategy (imported by the loader, so
  this package imports nothing here: the loader and the sources would form a cycle).
"""
