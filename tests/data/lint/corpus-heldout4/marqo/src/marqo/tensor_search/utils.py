import json
import os

from marqo.api.configs import default_env_vars


def read_env_vars_and_defaults(name: str):
    value = os.environ.get(name)
    if value is None:
        return default_env_vars().get(name)
    return json.loads(value)
