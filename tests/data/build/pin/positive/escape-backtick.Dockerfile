# escape=`
# A Windows-style escape character: the continuation is a backtick.
# expect: base-unpinned@5
FROM `
    localhost:5000/tools/runner:1.0
RUN echo ok
