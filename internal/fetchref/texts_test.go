package fetchref

import "testing"

// TestTexts pins every sentence fetch_reference can answer, verbatim.
func TestTexts(t *testing.T) {
	const id = "ref_1_ab12"
	for got, want := range map[string]string{
		textUnknown(id):          "There's no reference ref_1_ab12 here: it was never given, or it was dropped to make room, and ids are never reused, so fetching it again won't work.",
		textMissingID():          "fetch_reference needs ref_id, the id in a reference's stub (like ref_1_ab12); nothing was fetched.",
		textExpired(id):          "Reference ref_1_ab12 has expired, so this host didn't fetch it, and trying again won't change that.",
		textExpiryUnreadable(id): "Reference ref_1_ab12 is treated as expired, since its expiry time can't be read, so this host didn't fetch it, and trying again won't change that.",
		textExpiryRejected(id):   "Reference ref_1_ab12 is treated as expired, since its expiry time isn't in a form this host accepts, so this host didn't fetch it, and trying again won't change that.",
		textUnbound(id):          "Reference ref_1_ab12 isn't tied to any server, so there's nowhere to fetch it from; nothing was fetched, and trying again won't change that.",
		textNoOrigin(id):         "Reference ref_1_ab12 came from a server this host runs as a local process, which has no address to fetch from; nothing was fetched, and trying again won't change that.",
		textServerGone(id):       "The server that sent reference ref_1_ab12 isn't connected now, so nothing was fetched; once it is back, fetching again may work.",
		textNoCredentials(id):    "This host can't read the credentials of the server that sent reference ref_1_ab12, so nothing was fetched; whoever runs this host can set them.",
		textScheme(id):           "Reference ref_1_ab12 has a link of a kind this host never fetches, so nothing was fetched, and trying again won't change that.",
		textPlaintext(id):        "Reference ref_1_ab12 has an unencrypted link from a server this host reaches securely, so this host didn't fetch it, and trying again won't change that.",
		textCrossOrigin(id):      "Reference ref_1_ab12 points somewhere other than the server that sent it, and this host fetches only from a server's own address; nothing was fetched, and trying again won't change that.",
		textClaimOverCeiling(id, "1.0 GiB", "256.0 MiB"): "Reference ref_1_ab12 claims 1.0 GiB, more than the 256.0 MiB this fetch may take, so nothing was fetched; a larger max_bytes may allow it.",
		textBudget(id, "1.0 GiB"):                        "This host has fetched its limit of 1.0 GiB from the server that sent reference ref_1_ab12, so nothing was fetched; that limit resets when this host restarts.",
		textRedirect(id):                                 "The server answered the fetch of reference ref_1_ab12 with a redirect, which this host doesn't follow; nothing was fetched, and trying again won't change that unless the server serves it directly.",
		textHTTPStatus(id, 503):                          "The server answered the fetch of reference ref_1_ab12 with HTTP status 503, so nothing was saved; trying again later may work.",
		textOverCeiling(id, "64 bytes"):                  "Reference ref_1_ab12 turned out larger than the 64 bytes this fetch may take, so the fetch was stopped and nothing was saved; a larger max_bytes may allow it.",
		textOverBudget(id, "1.0 GiB"):                    "The fetch of reference ref_1_ab12 went past this host's limit of 1.0 GiB from its server, so it was stopped and nothing was saved; that limit resets when this host restarts.",
		textDigest(id):                                   "Reference ref_1_ab12's payload doesn't match the digest its server gave, so this host discarded it; fetching it again won't change that unless the server's copy changes.",
		textFailed(id):                                   "The fetch of reference ref_1_ab12 failed before the payload arrived whole, so nothing was saved; trying again later may work.",
		textNoPlace(id):                                  "This host has no place to save fetched payloads, so reference ref_1_ab12 wasn't fetched; whoever runs this host can give it one.",
		textNotSaved(id):                                 "Reference ref_1_ab12 was fetched but this host couldn't save it, so nothing was kept; trying again later may work.",
	} {
		if got != want {
			t.Errorf("text\n  %q\nwant\n  %q", got, want)
		}
	}
}
