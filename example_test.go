package codecell_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	_ "github.com/codecell-dev/codecell/tier/local"
)

func TestMain(m *testing.M) {
	codecell.Init()
	os.Exit(m.Run())
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
