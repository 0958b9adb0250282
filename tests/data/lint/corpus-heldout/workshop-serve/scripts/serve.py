import uvicorn
