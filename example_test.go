package codecell_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	_ "github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) {
	codecell.Init()
	os.Exit(testenv.Run(m))
}

func ExampleEngine_Run() {
	eng := &codecell.Engine{}
	res, err := eng.Run(context.Background(), &codecell.Exec{
		Tier:     "local",
		Language: "python",
		Code:     "print('hi')\n6 * 7",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Stdout, string(res.Value))
	// Output: success hi
	//  42
}

// The native tier isolates the program (namespaces, seccomp, landlock,
// cgroups). It re-executes the calling binary as the sandbox's init, so a
// program that uses it calls codecell.Init first thing in main. This example
// is not run: it needs a Linux host with user namespaces (`codecell doctor`
// says whether this one has them).
func ExampleEngine_Run_native() {
	// In main: codecell.Init() before anything else.
	eng := &codecell.Engine{Tiers: []codecell.Tier{&native.Tier{}}}
	res, err := eng.Run(context.Background(), &codecell.Exec{
		Tier:     "native",
		Language: "python",
		Code:     "import os\nos.getuid()",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Isolation.Level, string(res.Value))
}

// A Go function as a tool: the program calls it by name, and gets what it
// returns as JSON.
func ExampleFunc() {
	type addIn struct {
		A, B float64
	}
	add, err := codecell.Func("add", "Adds two numbers.", func(ctx context.Context, in addIn) (float64, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		panic(err)
	}
	tools := &codecell.Toolbox{}
	if err := tools.Add(add); err != nil {
		panic(err)
	}
	eng := &codecell.Engine{Tools: tools}
	res, err := eng.Run(context.Background(), &codecell.Exec{
		Tier:     "local",
		Language: "python",
		Code:     "await tools.add(A=2, B=40)",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, string(res.Value), res.ToolCalls[0].Name)
	// Output: success 42 add
}
