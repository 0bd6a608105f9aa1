package agent

// ConversationProblem is conversationProblem for the external tests.
var ConversationProblem = conversationProblem
