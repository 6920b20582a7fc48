"""The policy's state blob: whatever the policy wants to remember, as JSON bytes.

JSON, as the Rust SDK writes it, so an operator can read a persisted state file when a
policy misbehaves, whichever language wrote it. The blob is the only memory a policy
has: the host may start a fresh instance at any time, and anything kept in a module
global is then gone without notice.
"""

import json
from typing import Any, Callable, TypeVar

from switchyard_policy.contract import PolicyError

T = TypeVar("T")


def encode(value: Any) -> bytes:
    """The blob for `value` (anything `json` writes: dicts, lists, numbers, strings).
    Floats read back exactly; keys are sorted so equal states give equal blobs."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def decode(blob: bytes, default: Callable[[], T]) -> T:
    """The value in the blob the host passed in; `default()` for an empty blob (the
    first call). A blob that is not JSON is refused with a message naming the fault."""
    if not blob:
        return default()
    try:
        return json.loads(bytes(blob))
    except (ValueError, UnicodeDecodeError) as e:
        raise PolicyError(f"cannot decode the policy state: {e}") from None
