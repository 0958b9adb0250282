import os

import uvicorn


def main() -> None:
    """`langflow run`: serve the API and the built frontend on LANGFLOW_HOST:LANGFLOW_PORT."""
    host = os.getenv("LANGFLOW_HOST", "127.0.0.1")
    port = int(os.getenv("LANGFLOW_PORT", "7860"))
    uvicorn.run("langflow.main:create_app", host=host, port=port, factory=True)


if __name__ == "__main__":
    main()
