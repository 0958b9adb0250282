FROM alpine AS a
FROM a
COPY --from=¹ /x /y
