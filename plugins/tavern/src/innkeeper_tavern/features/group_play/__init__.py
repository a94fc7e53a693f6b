"""Group playthroughs (docs/groups.md "Group playthroughs"): :mod:`.turns` decides and records
each turn's speaker and gives the loader its group view, :mod:`.members` resolves the members'
cards and SillyTavern's join mode, :mod:`.start` creates a group playthrough."""
