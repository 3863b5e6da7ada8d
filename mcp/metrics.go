package mcp

import "github.com/prometheus/client_golang/prometheus"

// RegisterMetrics exports the server's Stats as Prometheus counters, named
// codecell_mcp_<counter>_total.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	counters := []struct {
		name, help string
		load       func() int64
	}{
		{"executions", "execute calls", s.Stats.Executions.Load},
		{"chains", "call_tool_chain calls", s.Stats.Chains.Load},
		{"searches", "search_tools calls", s.Stats.Searches.Load},
		{"discovery", "list_tools, tools_info and get_required_keys_for_tool calls", s.Stats.Discovery.Load},
		{"guardrail_blocks", "programs refused before they ran", s.Stats.GuardrailBlocks.Load},
		{"tool_calls", "calls programs made to tools", s.Stats.ToolCalls.Load},
	}
	for _, c := range counters {
		load := c.load
		err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "codecell", Subsystem: "mcp", Name: c.name + "_total", Help: "MCP " + c.help + " since the server started.",
		}, func() float64 { return float64(load()) }))
		if err != nil {
			return err
		}
	}
	return nil
}
