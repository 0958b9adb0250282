from fastapi import FastAPI

from .general import router as general_router

app = FastAPI(title="Unstructured Pipeline API", docs_url="/general/docs")
app.include_router(general_router)


@app.get("/healthcheck", include_in_schema=False)
def healthcheck():
    return {"healthcheck": "HEALTHCHECK STATUS: EVERYTHING OK!"}
