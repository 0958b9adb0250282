package agent

// Agent talks to an OpenAI-compatible endpoint (LocalAI by default, LOCALAGI_LLM_API_URL).
type Agent struct {
	Name  string
	Model string
}
