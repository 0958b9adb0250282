package models

type Gemma struct{}
