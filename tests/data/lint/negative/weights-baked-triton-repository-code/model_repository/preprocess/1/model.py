import numpy as np


class TritonPythonModel:
    def execute(self, requests):
        return [np.zeros(1) for _ in requests]
