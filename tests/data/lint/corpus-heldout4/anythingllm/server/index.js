const express = require("express");

const app = express();
app.get("/api/ping", (_req, res) => res.status(200).json({ online: true }));
app.listen(process.env.SERVER_PORT || 3001, "0.0.0.0");
