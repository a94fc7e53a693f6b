"""Card-declared MVU command processors in a sandboxed QuickJS VM.

* :mod:`.vm` — one VM: the processor environment (``prelude.js``), one declaration, the limits;
* :mod:`.pool` — the live VMs of the service, their receipts and idle eviction;
* :mod:`.gate` — the operation gate read from the turn's user text.

docs/contract/mvu-vm.md#command-processors; docs/mvu.md#command-processors-declared-by-cards.
"""

from .gate import operation_gate
from .pool import Declaration, VmPool
from .vm import Dispatch, ScriptVm, VmError

__all__ = ["Declaration", "Dispatch", "ScriptVm", "VmError", "VmPool", "operation_gate"]
