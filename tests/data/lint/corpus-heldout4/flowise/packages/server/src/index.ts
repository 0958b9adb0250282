import express from 'express'

export async function start(port = Number(process.env.PORT ?? 3000)): Promise<void> {
    const app = express()
    app.get('/api/v1/ping', (_req, res) => res.send('pong'))
    app.listen(port, () => console.info(`Flowise listening on :${port}`))
}
