echo "Starting the DeepFace API..."
# no arguments are passed by the image, so this exec does nothing and gunicorn below runs
exec "$@"

gunicorn --workers=1 --timeout=7200 --bind=0.0.0.0:5000 --log-level=debug --access-logfile=- "app:create_app()"
