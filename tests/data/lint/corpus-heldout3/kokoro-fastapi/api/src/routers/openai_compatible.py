from fastapi import APIRouter

router = APIRouter()


@router.get("/models")
async def list_models():
    return {"object": "list", "data": [{"id": "kokoro", "object": "model"}]}
