import click
import uvicorn
from fastapi import FastAPI

app = FastAPI(title="Rembg")


@app.post("/api/remove")
async def remove_endpoint() -> dict:
    return {}


@click.command(name="s", help="run the HTTP server")
@click.option("-p", "--port", default=7000, type=int)
@click.option("-h", "--host", default="0.0.0.0")
def s_command(port: int, host: str) -> None:
    uvicorn.run(app, host=host, port=port)
