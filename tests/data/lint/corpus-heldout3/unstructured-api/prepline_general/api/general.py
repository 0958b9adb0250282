from fastapi import APIRouter, UploadFile
from unstructured.partition.auto import partition

router = APIRouter()


@router.post("/general/v0/general")
async def general(files: list[UploadFile]):
    return [[el.to_dict() for el in partition(file=f.file, metadata_filename=f.filename)] for f in files]
