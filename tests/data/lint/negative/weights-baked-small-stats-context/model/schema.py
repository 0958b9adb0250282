from dataclasses import dataclass


@dataclass
class Score:
    label: str
    value: float
