from fastapi import FastAPI

from marqo.tensor_search.on_start_script import on_start

_config = {"vespa_query_url": "http://localhost:8080"}

if __name__ in ["__main__", "api"]:
    on_start(_config)

app = FastAPI(title="Marqo")


@app.get("/")
def root():
    return {"message": "Welcome to Marqo"}


@app.get("/health")
def check_health():
    return {"status": "green"}
