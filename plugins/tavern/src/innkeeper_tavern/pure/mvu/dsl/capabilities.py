"""Local capability contract v1: which imports of a card script select a built-in capability.

docs/contract/mvu-dsl.md#capabilities: exact import aliases select ``mvu-facade`` or
``backend-schema``; nothing is downloaded, hashed or executed, and any other import or call fails
explicitly instead of falling back to the original code.

The aliases are the exact URLs real cards import (docs/mvu.md lists them):

* ``backend-schema`` — the mvu_zod registration entry: ``import { registerMvuSchema } from
  '<alias>'`` binds the schema registration of the backend interpreter;
* ``mvu-facade`` — the MagVarUpdate bundle: ``import '<alias>'`` (a bare import) gives the
  command-processor VM its built-in ``Mvu`` facade.

Nothing is fetched: the alias only names the local capability.
"""

from __future__ import annotations

from typing import Final, Literal

Capability = Literal["mvu-facade", "backend-schema"]

#: Contract version (docs/contract/mvu-dsl.md#capabilities).
CAPABILITY_CONTRACT_VERSION: Final = 1
#: The statically reviewed mvu_zod registration entry and its digest
#: (docs/contract/mvu-dsl.md#schema-confirmation).
REVIEWED_MVU_ZOD_URL: Final = (
    "https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js"
)
REVIEWED_MVU_ZOD_SHA256: Final = "78c40f52d81022d9d769a923a49e673b8babb562656051a7d0410b6b19f45184"
#: Exact import aliases and the capability each selects.
IMPORT_ALIASES: Final[dict[str, Capability]] = {
    REVIEWED_MVU_ZOD_URL: "backend-schema",
    "https://cdn.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js": "backend-schema",
    "https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js": (
        "mvu-facade"
    ),
    "https://cdn.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js": "mvu-facade",
}
#: The one name ``backend-schema`` exports.
BACKEND_SCHEMA_EXPORT: Final = "registerMvuSchema"


def capability_of(module: str) -> Capability | None:
    """The capability an exact import alias selects (``None``: not part of the contract)."""
    return IMPORT_ALIASES.get(module)
