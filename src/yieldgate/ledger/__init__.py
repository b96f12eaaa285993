"""The ledger: every run with its manifest, step records, eval records, events and decisions; SQLite or PostgreSQL.

`Ledger` (`store.py`) joins its parts: the connection (`connection.py`), runs (`runs.py`), steps (`steps.py`, stored
as column blocks: `blocks.py`) and the other records (`records.py`). Beside it: the PostgreSQL backend (`pg.py`),
schema migrations, checksums, the file check, owners, mounts, `copy` and `check`.
"""

from yieldgate.ledger.location import DEFAULT_LEDGER, default_location, must_exist
from yieldgate.ledger.records import EvalRecord, fold_stderr, higher_is_better
from yieldgate.ledger.store import Ledger

__all__ = [
    "Ledger",
    "EvalRecord",
    "fold_stderr",
    "DEFAULT_LEDGER",
    "default_location",
    "must_exist",
    "higher_is_better",
]
