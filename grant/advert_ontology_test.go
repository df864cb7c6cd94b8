package grant

import "testing"

// A feature set's tagOntology is kept as declared, for the treatment
// rules to read; one without it has none.
func TestFeatureSetOntology(t *testing.T) {
	ad, err := ParseAdvertisement([]byte(`{"featureSets": {"chat": {"uses": ["pushEvents"], "tagOntology": {"open": true, "coreTags": ["chat:ambient"], "n": 1.50}}, "plain": {"uses": ["pushEvents"]}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ad.FeatureSets) != 2 {
		t.Fatalf("feature sets %+v", ad.FeatureSets)
	}
	if got := string(ad.FeatureSets[0].TagOntology); got != `{"coreTags":["chat:ambient"],"n":1.50,"open":true}` {
		t.Errorf("chat's ontology %s", got)
	}
	if ad.FeatureSets[1].TagOntology != nil {
		t.Errorf("plain's ontology %s, want none", ad.FeatureSets[1].TagOntology)
	}
	c := ad.Clone()
	c.FeatureSets[0].TagOntology[0] = 'x'
	if ad.FeatureSets[0].TagOntology[0] != '{' {
		t.Error("Clone shares the ontology's bytes")
	}
}
