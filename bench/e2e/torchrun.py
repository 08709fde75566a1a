"""torchrun (torch.distributed.run) with a fix for Debian's torch 1.13 on Python 3.11, whose
Std.from_str returns None for "0" (the default of --redirects and --tee)."""
import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed import run

_original = api.Std.from_str


def _from_str(value):
    parsed = _original(value)
    if parsed is None and value.strip() == "0":
        return api.Std.NONE
    return parsed


api.Std.from_str = staticmethod(_from_str)
if __name__ == "__main__":
    sys.exit(run.main())
