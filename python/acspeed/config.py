"""The Python view of a communication config (schema v1, defined and validated by the C++ runtime:
runtime/include/acspeed/config.h). acspeed only ever builds this view from canonical JSON that
`_core.config_from_json` produced, so it reads fields and does not validate them again."""
import dataclasses
import json
from typing import Optional

import torch

_COMPRESSION_DTYPES = {"none": None, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class Config:
    json: str                                 # canonical JSON, what every rank received
    bucket_cap_mb: Optional[float] = None     # None keeps DDP's default
    first_bucket_mb: Optional[float] = None
    gradient_as_bucket_view: Optional[bool] = None
    algorithm: str = "allreduce"              # allreduce | reduce_scatter | hierarchical
    streams: int = 1
    compression: str = "none"                 # none | fp16 | bf16
    nccl_rule_count: int = 0                  # rules for the NCCL tuner plugin (GPU only)

    @classmethod
    def from_canonical(cls, text: str) -> "Config":
        data = json.loads(text)
        return cls(json=text,
                   bucket_cap_mb=data.get("bucket_cap_mb"),
                   first_bucket_mb=data.get("first_bucket_mb"),
                   gradient_as_bucket_view=data.get("gradient_as_bucket_view"),
                   algorithm=data.get("algorithm", "allreduce"),
                   streams=int(data.get("streams", 1)),
                   compression=data.get("compression", "none"),
                   nccl_rule_count=len(data.get("nccl_rules", [])))

    @property
    def compression_dtype(self) -> Optional[torch.dtype]:
        return _COMPRESSION_DTYPES[self.compression]
