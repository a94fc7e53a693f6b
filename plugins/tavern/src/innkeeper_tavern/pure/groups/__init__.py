"""Group chats, pure parts: the group model and its validation (:mod:`.model`), SillyTavern's
group file and group chat formats (:mod:`.st_format`) and speaker selection (:mod:`.speakers`).

docs/groups.md describes the resource, its routes and the speaker strategies.
"""
