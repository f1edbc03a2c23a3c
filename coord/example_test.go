package coord_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/coord"
	"github.com/sluice-cdc/sluice/internal/testenv/etcdenv"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, _ := os.MkdirTemp("", "coord-example-")
	defer os.RemoveAll(dir)
	srv, err := etcdenv.StartServer(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	cfg := coord.Config{Endpoints: []string{srv.Endpoint()}, LeaseTTL: 2 * time.Second}
	a, _ := coord.New(with(cfg, "a"), "orders", nil)
	defer a.Close()
	b, _ := coord.New(with(cfg, "b"), "orders", nil)
	defer b.Close()

	la, err := a.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	store := a.CheckpointStore(la)
	v, _ := store.Save(ctx, checkpoint.Checkpoint{Epoch: la.Epoch(), LastSeq: 1}, 0)

	won := make(chan *coord.Leadership)
	go func() {
		lb, _ := b.Campaign(ctx)
		won <- lb
	}()
	for st, _ := a.Status(ctx); len(st.Followers) == 0; st, _ = a.Status(ctx) {
		time.Sleep(10 * time.Millisecond)
	}
	st, _ := a.Status(ctx)
	fmt.Printf("leader %s, followers %s\n", st.Leader.ID, st.Followers[0].ID)

	la.Resign(ctx)
	<-la.Lost()
	lb := <-won
	fmt.Println("b leads with a higher epoch:", lb.Epoch() > la.Epoch())

	_, err = store.Save(ctx, checkpoint.Checkpoint{Epoch: la.Epoch(), LastSeq: 2}, v)
	fmt.Println("a's late save is refused:", err != nil)
	_, err = b.CheckpointStore(lb).Save(ctx, checkpoint.Checkpoint{Epoch: lb.Epoch(), LastSeq: 2}, v)
	fmt.Println("b's save:", err)
	// Output:
	// leader a, followers b
	// b leads with a higher epoch: true
	// a's late save is refused: true
	// b's save: <nil>
}

func with(cfg coord.Config, id string) coord.Config {
	cfg.ID = id
	return cfg
}
