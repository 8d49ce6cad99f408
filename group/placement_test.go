package group

import (
	"fmt"
	"testing"
)

func TestCoordinatorForMovesOnlyTheLeaversGroups(t *testing.T) {
	all := []int32{1, 2, 3, 4}
	without3 := []int32{1, 2, 4}
	counts := map[int32]int{}
	for i := range 4000 {
		id := fmt.Sprintf("group-%d", i)
		before, after := CoordinatorFor(id, all), CoordinatorFor(id, without3)
		counts[before]++
		if before != 3 && before != after {
			t.Fatalf("%s moved from %d to %d though %d stayed", id, before, after, before)
		}
		if after == 3 {
			t.Fatalf("%s placed on the departed broker", id)
		}
		if again := CoordinatorFor(id, []int32{4, 2, 3, 1}); again != before {
			t.Fatalf("%s: answer depends on the order of brokers", id)
		}
	}
	for _, id := range all {
		if counts[id] < 800 || counts[id] > 1200 {
			t.Errorf("broker %d coordinates %d of 4000 groups: uneven", id, counts[id])
		}
	}
	if CoordinatorFor("g", nil) != -1 {
		t.Fatal("no brokers must give -1")
	}
}
