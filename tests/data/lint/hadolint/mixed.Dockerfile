FROM python
RUN cd /tmp && pip install flask
USER root
ENV API_KEY=example
CMD python -m server
