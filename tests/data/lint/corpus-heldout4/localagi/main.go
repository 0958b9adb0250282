package main

import (
	"log"
	"os"

	"github.com/gofiber/fiber/v2"
)

// `localagi serve` starts the agent pool and the web UI on LOCALAGI_LISTEN (default :3000).
func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		log.Fatal("usage: localagi serve")
	}
	app := fiber.New()
	app.Static("/", "./webui/react-ui/dist")
	addr := os.Getenv("LOCALAGI_LISTEN")
	if addr == "" {
		addr = ":3000"
	}
	log.Fatal(app.Listen(addr))
}
