# escape=x
FROM alpine
