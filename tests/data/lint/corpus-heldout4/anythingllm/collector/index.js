const express = require("express");

const app = express();
app.post("/process", (_req, res) => res.json({ success: true }));
app.listen(8888, "127.0.0.1");
