"""Moving a whole SillyTavern user folder into Innkeeper (docs/migration.md).

``layout`` recognizes the folder, ``chats`` turns a chat ``.jsonl`` into an import-context
document, ``personas`` turns ST personas into Tavern users, ``ledger`` remembers what was
imported (by content hash) so a re-run skips it, ``report`` prints what happened and ``run``
drives an import through the running server or the stores.
"""
