"""Group chats, pure parts: the group model and its validation (:mod:`.model`), SillyTavern's
group file and group chat formats (:mod:`.st_format`) and speaker selection (:mod:`.speakers`).

docs/resources.md "Groups" describes the resource and its routes, docs/groups.md speaker choice.
"""
