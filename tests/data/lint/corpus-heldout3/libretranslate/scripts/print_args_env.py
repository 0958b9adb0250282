"""Print the parsed command-line settings as shell assignments (LT_HOST=..., LT_PORT=...)."""
from libretranslate.default_values import DEFAULT_ARGUMENTS
from libretranslate.main import get_args

args = get_args()
for name in ("host", "port", "threads"):
    print(f"LT_{name.upper()}={getattr(args, name)}")
