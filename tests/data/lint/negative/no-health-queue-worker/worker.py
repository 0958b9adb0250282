import json
import sys


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        print(json.dumps({"id": job["id"], "done": True}))


if __name__ == "__main__":
    main()
